# pytest imports this package as ``gym`` (tests/ has no __init__.py), so it shadows the
# legacy OpenAI Gym for code that probes for it: stable-baselines3's save() reads
# ``gym.__version__`` when ``import gym`` succeeds. Give it one.
__version__ = "not OpenAI Gym: the whale_opt.gym tests"
