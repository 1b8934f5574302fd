"""The composition root: builds servers from configuration."""
