"""Root conftest: plugin behaviour is tested by running real pytest sessions."""

pytest_plugins = ["pytester"]
