"""papayu-git: a git-native LLM fix-plan orchestrator."""

__version__ = "0.1.0"
