from osk.cli import main

raise SystemExit(main())
