from ucsj.cli import main

main()
