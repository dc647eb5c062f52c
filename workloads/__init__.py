"""Real RL programs that archsim profiles (DQN, AlexNet inference, R2D2)."""
