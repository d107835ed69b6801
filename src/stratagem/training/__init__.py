"""Training: SFT data, SFT, and the SEPO-GRPO trainer. Maths lives in pure functions."""
