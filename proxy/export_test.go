package proxy

// Test hooks for the external test package.
var SASLUserForTest = saslUser
