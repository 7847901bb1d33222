package main

import (
	"fmt"
	"io"

	"github.com/mcpbus/mcpbus/pkg/crypto"
)

// cmdKeygen prints a new credentials key (base64 of 32 random bytes) for
// MCPBUS_CREDENTIALS_KEY. It takes no arguments.
func cmdKeygen(args []string, w io.Writer) error {
	if len(args) != 0 {
		return fmt.Errorf("keygen takes no arguments")
	}
	k, err := crypto.NewKey()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, k)
	return err
}
