"""CloudWatch, locally: the metrics the app emits and the synthesized alarms evaluated on them
(`alarms`)."""
