"""Command-line front end: ``chakra`` (one module per verb group) and upstream-named drop-ins."""
