package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/jwtkeys"
)

type tokenFlags struct {
	keyDir           string
	subject          string
	ttl              time.Duration
	issuer, audience string
	out              string
}

func newTokenCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Agent bearer tokens",
	}
	cmd.AddCommand(newTokenIssueCommand(g))
	return cmd
}

func newTokenIssueCommand(g *globals) *cobra.Command {
	f := &tokenFlags{}
	cmd := &cobra.Command{
		Use:   "issue",
		Short: "Mint an agent's bootstrap token with the server's signing key",
		Long: `Signs a bearer JWT for one agent with the current signing key of a key directory
(the same --jwt-key-dir as "hotcert server"), and prints
it, or writes it to --out (mode 0600). The agent presents it with --token-file on
its first connection; the server then hands it short-lived tokens over the
stream, so the bootstrap token only has to outlive the agent's first connection.

The server verifies the token whatever its lifetime, until it expires or its key
leaves the set (after a rotation's grace period): keep bootstrap tokens short and
the grace period long enough (docs/jwt-keys.md). The log names the subject, key id
and expiry, never the token.`,
		Example: `  hotcert token issue --jwt-key-dir /etc/agent-token-keys --subject agent-42 --ttl 24h --out agent-42.token
  hotcert token issue --jwt-key-dir /etc/agent-token-keys --subject agent-42 --ttl 1h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if f.subject == "" {
				return errors.New("--subject is required: the agent id the token is for (agent --id)")
			}
			if f.ttl <= 0 {
				return fmt.Errorf("--ttl %s: want a positive lifetime", f.ttl)
			}
			src, err := keySource(f.keyDir, log)
			if err != nil {
				return err
			}
			if src == nil {
				return errors.New("give the signing keys: --jwt-key-dir")
			}
			opts := []jwtkeys.Option{jwtkeys.WithMaxTokenTTL(f.ttl), hotcert.WithLogger(log)}
			if f.issuer != "" {
				opts = append(opts, jwtkeys.WithIssuer(f.issuer))
			}
			if f.audience != "" {
				opts = append(opts, jwtkeys.WithAudience(f.audience))
			}
			ks, err := jwtkeys.New(ctx, src, opts...)
			if err != nil {
				return inUserTerms(err, flagFiles{dirs: map[string]string{f.keyDir: "--jwt-key-dir"}})
			}
			defer ks.Close()
			tok, err := ks.Issue(f.subject, f.ttl)
			if err != nil {
				return err
			}
			// The server verifies with the same rules: check the token before
			// handing it out.
			claims, err := ks.Verify(tok)
			if err != nil {
				return fmt.Errorf("the issued token does not verify: %w", err)
			}
			expires := claims.ExpiresAt.UTC()
			if f.out != "" {
				if err := writeSecretFile(f.out, []byte(tok+"\n")); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
			} else if _, err := fmt.Fprintln(g.stdout, tok); err != nil {
				return err
			}
			log.Info("issued agent token", "subject", f.subject, "kid", ks.SigningKeyID(), "expires", expires.Format(time.RFC3339), "out", f.out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.keyDir, "jwt-key-dir", "", "key directory of the server's --jwt-key-dir (signing.key, optional verify.pem)")
	fl.StringVar(&f.subject, "subject", "", "agent id the token is for (its sub claim; the agent's --id)")
	fl.DurationVar(&f.ttl, "ttl", time.Hour, "lifetime of the token")
	fl.StringVar(&f.issuer, "jwt-issuer", "", "iss claim (the server's --jwt-issuer, if it sets one)")
	fl.StringVar(&f.audience, "jwt-audience", "", "aud claim (the server's --jwt-audience, if it sets one)")
	fl.StringVar(&f.out, "out", "", "write the token to this file (mode 0600) instead of standard output")
	return cmd
}

// writeSecretFile writes data to path with mode 0600, atomically (a reader
// such as an agent's --token-file never sees half a token).
func writeSecretFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
