from osk.surfaces.cli import main

raise SystemExit(main())
