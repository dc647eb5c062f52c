"""A real Nature-DQN learner on ALE Pong, instrumented with archsim phase markers.

Modules: ``env`` (ALE with DQN preprocessing), ``model`` (the Nature network), ``replay`` (preallocated
uint8 replay), ``learner`` (epsilon-greedy acting, TD targets, Huber loss, RMSProp, target sync),
``run`` (the loop that marks every phase; no CLI), ``cli`` (options for ``archsim capture dqn``).
"""
