"""Who may ask, and how: the `mlog` command line (and later the controller and the server)."""
