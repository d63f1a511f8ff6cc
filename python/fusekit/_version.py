"""The package version; the same as the C++ project's (CMakeLists.txt's project(... VERSION ...)),
which pyproject.toml reads for the wheel."""

__version__ = "0.1.0"
