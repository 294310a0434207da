"""Shipped variant files (``*.toml``), one per variant; loaded by ``pytest_clinaudit.catalog``."""
