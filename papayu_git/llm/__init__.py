"""LLM providers, prompts and the strict-JSON planner (docs/DESIGN.md, "Providers")."""
