"""The plugin's options: one group, validated values with pinned messages, ini keys, precedence."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
from grading_helpers import (
    REPO,
    grading_args,
    reference,
    reference_report,
    submitted,
    summary_line,
    write_json,
)

from pytest_clinaudit.grading import options


@pytest.fixture
def report(pytester: pytest.Pytester, warm_cache: Path) -> Path:
    """The wdbc-baseline reference report, written in the pytester directory."""
    return write_json(submitted(pytester.path), reference_report(warm_cache, "wdbc-baseline"))


FLAGS = [
    options.SUBMISSION,
    options.VARIANT,
    options.PROFILE,
    options.FAIL_UNDER,
    options.SCORE_JSON,
    options.VARIANTS_DIR,
    options.CACHE_DIR,
    options.MIMIC_DIR,
    options.MAX_BYTES,
    options.MANIFEST,
    options.META,
]


def test_every_flag_is_listed_in_the_clinaudit_group_of_the_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    text = result.stdout.str()
    group = text[text.index("clinaudit: grade a clinical security audit report:") :]
    group = group[: group.index("\n\n")]
    for flag in FLAGS:
        assert f"  {flag}=" in group, flag
    for ini in (
        "clinaudit_profile",
        "clinaudit_fail_under",
        "clinaudit_variants_dir",
        "clinaudit_cache_dir",
        "clinaudit_mimic_dir",
        "clinaudit_max_bytes",
    ):
        assert ini in text, ini


# ------------------------------------------------------------- pinned messages


@pytest.mark.parametrize(
    ("validator", "value", "message"),
    [
        (
            options.profile,
            "lenient",
            "invalid profile 'lenient': choose 'strict' (this project's grading) or 'metr' (the published scorer, reproduced exactly)",  # noqa: E501
        ),
        (
            options.score_threshold,
            "1.5",
            "invalid score '1.5': expected a number between 0 and 1, e.g. 0.8",
        ),
        (
            options.score_threshold,
            "nan",
            "invalid score 'nan': expected a number between 0 and 1, e.g. 0.8",
        ),
        (
            options.score_threshold,
            "high",
            "invalid score 'high': expected a number between 0 and 1, e.g. 0.8",
        ),
        (
            options.byte_size,
            "0",
            "invalid size '0': expected a positive number of bytes such as 1048576, 512K or 1M",
        ),
        (
            options.byte_size,
            "1 TB",
            "invalid size '1 TB': expected a positive number of bytes such as 1048576, 512K or 1M",
        ),
        (options.variant_name, "  ", "expected a variant name such as wdbc-hard"),
        (
            options.meta_item,
            "novalue",
            "invalid metadata 'novalue': expected KEY=VALUE with a KEY of letters, digits, '_', '.', '-' (e.g. run=42)",  # noqa: E501
        ),
    ],
)
def test_an_invalid_value_raises_argument_type_error_with_a_pinned_message(
    validator: object, value: str, message: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        validator(value)  # type: ignore[operator]
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("1048576", 1 << 20),
        ("512K", 512 << 10),
        ("1M", 1 << 20),
        ("2MiB", 2 << 20),
        ("10kb", 10 << 10),
    ],
)
def test_sizes_accept_plain_bytes_and_binary_suffixes(value: str, size: int) -> None:
    assert options.byte_size(value) == size


def test_profiles_are_case_insensitive() -> None:
    assert options.profile(" METR ") == "metr"


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        (options.PROFILE, "lenient", "argument --clinaudit-profile: invalid profile 'lenient'"),
        (options.FAIL_UNDER, "2", "argument --clinaudit-fail-under: invalid score '2'"),
        (options.MAX_BYTES, "-5", "argument --clinaudit-max-bytes: invalid size '-5'"),
        (
            options.VARIANTS_DIR,
            "no/such/dir",
            "argument --clinaudit-variants-dir: 'no/such/dir' is not a directory",
        ),
        (
            options.MIMIC_DIR,
            "no/such/dir",
            "argument --clinaudit-mimic-dir: 'no/such/dir' is not a directory",
        ),
        (options.META, "x", "argument --clinaudit-meta: invalid metadata 'x'"),
    ],
)
def test_an_invalid_value_on_the_command_line_is_a_usage_error(
    pytester: pytest.Pytester, flag: str, value: str, message: str
) -> None:
    result = pytester.runpytest(flag, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_a_submission_without_a_variant_says_that_the_variant_is_required(
    pytester: pytest.Pytester, report: Path
) -> None:
    result = pytester.runpytest("--submission", str(report))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --submission needs --variant NAME: the variant decides the model, data and tolerances*"  # noqa: E501
        ]
    )


def test_a_variant_without_a_submission_says_how_to_grade(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--variant", "wdbc-hard")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--variant wdbc-hard was given without --submission" in result.stderr.str()


def test_an_unknown_variant_is_a_usage_error_listing_the_valid_names_and_aliases(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    result = pytester.runpytest(*grading_args(report, "wdbc-hardest", warm_cache))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--variant: unknown variant 'wdbc-hardest'; valid variants:" in err
    assert "wdbc-hard (hardened)" in err
    assert "wdbc-baseline (baseline)" in err


def test_a_usage_error_still_writes_the_score_json_with_the_reason(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    out = pytester.path / "score.json"
    pytester.runpytest(
        *grading_args(report, "nope", warm_cache, "--clinaudit-score-json", str(out))
    )
    document = json.loads(out.read_text())
    assert document["score"] is None
    assert "unknown variant 'nope'" in document["error"]


def test_a_paper_alias_selects_its_variant(pytester: pytest.Pytester, warm_cache: Path) -> None:
    path = write_json(submitted(pytester.path, "r.json"), reference_report(warm_cache, "wdbc-hard"))
    result = pytester.runpytest(*grading_args(path, "hardened", warm_cache))
    assert result.ret == 0
    assert (
        summary_line(result.stdout.str())
        == "clinaudit: wdbc-hard score 1.000 (profile strict) category none"
    )


def test_the_profile_defaults_to_strict_and_can_be_set_in_the_ini_file(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    assert "(profile strict)" in summary_line(
        pytester.runpytest(*grading_args(report, "baseline", warm_cache)).stdout.str()
    )
    pytester.makeini("[pytest]\nclinaudit_profile = metr\n")
    result = pytester.runpytest(*grading_args(report, "baseline", warm_cache))
    assert "(profile metr)" in summary_line(result.stdout.str())
    result = pytester.runpytest(
        *grading_args(report, "baseline", warm_cache, "--clinaudit-profile", "strict")
    )
    assert "(profile strict)" in summary_line(result.stdout.str())


def test_an_invalid_ini_value_is_a_usage_error_naming_the_ini_key(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    pytester.makeini("[pytest]\nclinaudit_max_bytes = lots\n")
    result = pytester.runpytest(*grading_args(report, "baseline", warm_cache))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini option clinaudit_max_bytes: invalid size 'lots'" in result.stderr.str()


def test_the_ini_file_of_a_toml_project_may_hold_numbers(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\nclinaudit_max_bytes = 64\n")
    result = pytester.runpytest(*grading_args(report, "baseline", warm_cache))
    assert "the grader reads at most 64 bytes" in result.stdout.str()


def test_the_size_limit_fails_the_present_check_of_a_larger_file(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    result = pytester.runpytest(
        *grading_args(report, "baseline", warm_cache, "--clinaudit-max-bytes", "100")
    )
    result.stdout.fnmatch_lines(
        ["*report.json is * bytes; the grader reads at most 100 bytes (--clinaudit-max-bytes)*"]
    )
    assert summary_line(result.stdout.str()).endswith(
        "score 0.000 (profile strict) category unparseable"
    )


def _header_cache(output: str) -> str:
    line = next(line for line in output.splitlines() if line.startswith("clinaudit: cache "))
    return line.removeprefix("clinaudit: cache ").split(";")[0]


def test_the_cache_directory_comes_from_the_flag_then_the_ini_file_then_the_environment(
    pytester: pytest.Pytester, report: Path, warm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_env, from_ini = pytester.path / "env-cache", pytester.path / "ini-cache"
    shutil.copytree(warm_cache, from_env)
    shutil.copytree(warm_cache, from_ini)
    monkeypatch.setenv("CLINAUDIT_CACHE_DIR", str(from_env))
    common = ["--submission", str(report), "--variant", "baseline", "-p", "no:cacheprovider"]
    assert _header_cache(pytester.runpytest(*common).stdout.str()) == str(from_env)
    pytester.makeini("[pytest]\nclinaudit_cache_dir = ini-cache\n")
    assert _header_cache(pytester.runpytest(*common).stdout.str()) == str(from_ini)
    result = pytester.runpytest(*common, "--clinaudit-cache-dir", str(warm_cache))
    assert _header_cache(result.stdout.str()) == str(warm_cache)


def test_extra_variant_files_are_loaded_from_every_variants_dir(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    text = (REPO / "variants" / "wdbc-baseline.toml").read_text()
    for number in (1, 2):
        directory = pytester.mkdir(f"lab{number}")
        custom = text.replace('name = "wdbc-baseline"', f'name = "lab-baseline-{number}"')
        custom = custom.replace('aliases = ["baseline"]', f'aliases = ["lab{number}"]')
        (directory / "lab.toml").write_text(custom)
    dirs = ["--clinaudit-variants-dir", "lab1", "--clinaudit-variants-dir", "lab2"]
    result = pytester.runpytest(*grading_args(report, "lab2", warm_cache, *dirs))
    assert result.ret == 0
    assert summary_line(result.stdout.str()).startswith("clinaudit: lab-baseline-2 score 1.000")
    pytester.makeini("[pytest]\nclinaudit_variants_dir = lab1\n")
    assert pytester.runpytest(*grading_args(report, "lab1", warm_cache)).ret == 0


def test_an_invalid_variant_file_is_a_usage_error_naming_file_and_key(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    directory = pytester.mkdir("broken")
    (directory / "bad.toml").write_text(
        (REPO / "variants" / "wdbc-baseline.toml")
        .read_text()
        .replace("[fgsm]", "[fgsm]\nepsilom = 1")
    )
    result = pytester.runpytest(
        *grading_args(report, "baseline", warm_cache, "--clinaudit-variants-dir", "broken")
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "bad.toml: fgsm: unknown key 'epsilom'" in result.stderr.str()


def test_a_mimic_variant_without_an_extract_explains_how_to_provide_one(
    pytester: pytest.Pytester, report: Path, warm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLINAUDIT_MIMIC_DIR", raising=False)
    result = pytester.runpytest(*grading_args(report, "mimic-baseline", warm_cache))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "cannot build the mimic-baseline reference" in err
    assert "--clinaudit-mimic-dir" in err


def test_the_mimic_directory_falls_back_to_the_environment(
    pytester: pytest.Pytester, report: Path, warm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = pytester.mkdir("extract")
    monkeypatch.setenv("CLINAUDIT_MIMIC_DIR", str(empty))
    result = pytester.runpytest(*grading_args(report, "mimic-baseline", warm_cache))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert str(empty) in result.stderr.str()


def test_metadata_reaches_the_score_json_and_the_junit_xml(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    more = [
        "--clinaudit-meta",
        "run=42",
        "--clinaudit-meta",
        "agent=a=b",
        "--clinaudit-score-json",
        "s.json",
        "--junitxml",
        "j.xml",
    ]
    assert pytester.runpytest(*grading_args(report, "baseline", warm_cache, *more)).ret == 0
    assert json.loads((pytester.path / "s.json").read_text())["meta"] == {
        "run": "42",
        "agent": "a=b",
    }
    assert 'name="clinaudit.meta.agent" value="a=b"' in (pytester.path / "j.xml").read_text()


def test_without_submission_the_plugin_changes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_one():\n    assert True\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert [line for line in result.stdout.lines if line.startswith("clinaudit:")] == []
    assert "clinaudit grade" not in result.stdout.str()


def _manifest(path: Path, warm_cache: Path, **changes: object) -> Path:
    ref = reference(warm_cache, "wdbc-baseline")
    manifest = {
        "format": "clinaudit-manifest-1",
        "variant": "wdbc-baseline",
        "artifact_sha256": ref.artifact_sha256,
        "data_sha256": ref.data_sha256,
        "libraries": ref.libraries,
        **changes,
    }
    return write_json(path, manifest)


def test_a_matching_manifest_lets_the_session_grade_and_is_named_in_the_header(
    pytester: pytest.Pytester, report: Path, warm_cache: Path
) -> None:
    manifest = _manifest(pytester.path / "manifest.json", warm_cache)
    result = pytester.runpytest(
        *grading_args(report, "baseline", warm_cache, "--clinaudit-manifest", str(manifest))
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"clinaudit: cache *; manifest {manifest} (artifact matches)"])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"artifact_sha256": "0" * 64},
            "the model artifact sha256 in the manifest is 0000000000000000...",
        ),
        ({"variant": "wdbc-hard"}, "the workspace was built for variant 'wdbc-hard'"),
        ({"format": "other"}, "not a clinaudit manifest"),
    ],
)
def test_a_manifest_for_another_artifact_refuses_to_grade(
    pytester: pytest.Pytester,
    report: Path,
    warm_cache: Path,
    changes: dict[str, object],
    message: str,
) -> None:
    manifest = _manifest(pytester.path / "manifest.json", warm_cache, **changes)
    result = pytester.runpytest(
        *grading_args(report, "baseline", warm_cache, "--clinaudit-manifest", str(manifest))
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--clinaudit-manifest: " in result.stderr.str()
    assert message in result.stderr.str()
