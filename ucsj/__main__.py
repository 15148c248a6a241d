from ucsj.launch import main

main()
