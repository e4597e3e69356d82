"""The service: the log, the image and the controller together; snapshot policy; settings."""
