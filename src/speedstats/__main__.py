from speedstats.cli import main

raise SystemExit(main())
