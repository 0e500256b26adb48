"""What an API process uses to serve a batch model's versions and answer its routes."""
