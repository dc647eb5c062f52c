"""Ape-X-style distributed DQN on real ALE Pong: actor processes, a prioritized replay (in the learner
or in its own server process) and a learner, all talking over TCP (``archsim capture apex``)."""
