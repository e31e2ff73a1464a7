"""Golden training in torch: configurations, models, the papers' techniques, the trainer."""
