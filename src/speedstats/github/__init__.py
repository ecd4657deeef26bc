"""The GitHub layer: PyGithub only, no framework imports."""
