def greet(name):
    """The greeting shown to a user."""
    return "Hello " + name
