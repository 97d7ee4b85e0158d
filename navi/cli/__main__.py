"""``python -m navi.cli``: the ``navi`` command."""

from navi.cli import main

raise SystemExit(main())
