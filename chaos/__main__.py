from chaos.cli.commands import main

main()
