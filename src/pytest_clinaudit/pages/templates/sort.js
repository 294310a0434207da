// Sortable tables of pytest-clinaudit pages: click (or Enter/Space on) a column's
// header button to sort by it; again to reverse. Cells sort by their data-value:
// as numbers when every non-empty value of the column is a number, otherwise as
// text with digit runs compared by value ("run-10" after "run-9"). Empty values
// (not applicable) always go last; equal values keep their original order.
(function () {
  "use strict";
  var collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

  function cellValue(row, column) {
    var cell = row.cells[column];
    if (!cell) { return ""; }
    var value = cell.getAttribute("data-value");
    return value === null ? cell.textContent.trim() : value;
  }

  function isNumber(text) {
    return text !== "" && isFinite(Number(text));
  }

  function sortTable(table, column, button) {
    var header = button.closest("th");
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.forEach(function (row, index) {
      if (!row.hasAttribute("data-order")) { row.setAttribute("data-order", String(index)); }
    });
    var values = rows.map(function (row) { return cellValue(row, column); });
    var numeric = values.every(function (v) { return v === "" || isNumber(v); });
    var keyed = rows.map(function (row, index) {
      return { row: row, value: values[index], order: Number(row.getAttribute("data-order")) };
    });
    keyed.sort(function (a, b) {
      if (a.value === "" || b.value === "") {
        if (a.value === b.value) { return a.order - b.order; }
        return a.value === "" ? 1 : -1;
      }
      var difference = numeric ? Number(a.value) - Number(b.value) : collator.compare(a.value, b.value);
      if (difference === 0) { return a.order - b.order; }
      return ascending ? difference : -difference;
    });
    keyed.forEach(function (item) { body.appendChild(item.row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.setAttribute("aria-sort", "none");
    });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var status = document.getElementById("sort-status");
    if (status) {
      var title = document.getElementById(table.getAttribute("aria-labelledby") || "") ||
        (table.caption && table.caption.firstChild);
      status.textContent = "Sorted " + (title ? title.textContent.trim() + " " : "") +
        "by " + button.firstChild.textContent.trim() + ", " + (ascending ? "ascending" : "descending") + ".";
    }
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead button.sort").forEach(function (button) {
      button.addEventListener("click", function () {
        sortTable(table, Number(button.getAttribute("data-column")), button);
      });
    });
  });
})();
