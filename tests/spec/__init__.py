"""The spec language (supervision/spec/): what each field accepts, and why not."""
