"""Model families: everything that differs between Qwen3-VL, Qwen2.5-VL, …"""
