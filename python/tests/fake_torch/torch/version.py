cuda = "0.0-fake"
