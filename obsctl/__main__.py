from obsctl.cli import main

main()
