"""Tree files (supervision/config/): TOML read into specs, the [engine] table, variables."""
