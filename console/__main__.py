"""`python -m console` is the `specops` command."""

from console.cli import main

raise SystemExit(main())
