"""EventBridge, locally: the templates' rate schedules (`schedules`)."""
