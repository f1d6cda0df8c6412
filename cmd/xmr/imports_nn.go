package main

// The nn package registers `xmr bench transformer`.
import _ "github.com/xmr-project/xmr/nn"
