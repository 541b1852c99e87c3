"""Placeholder replaced below."""
def configure_process():
    pass
