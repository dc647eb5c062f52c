from archsim.cli import run

run()
