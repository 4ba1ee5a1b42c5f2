"""LLM providers, prompts and the strict-JSON planner (SPEC §8; issue 4)."""
