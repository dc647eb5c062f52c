"""Hardware presets (YAML). A package only so that ``importlib.resources`` finds the files in a wheel."""
