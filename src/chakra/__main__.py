"""``python -m chakra`` runs the ``chakra`` command."""

from chakra.cli.main import main

main()
