def farewell(name):
    """The line shown when a user leaves."""
    return "Bye " + name
