# The repository's own tests drive real pytest runs of the plugin through pytester.
pytest_plugins = ["pytester"]
