package encrypted

import (
	"context"
	"fmt"

	"github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/keyservice"
)

// memoryKeys is a sops key service that opens age keys with identities
// handed over in memory and every other key type as the sops CLI does.
// sops asks it once per key of every key group and combines the groups'
// parts itself (Shamir), so a file with several groups opens exactly as it
// does with the environment's keys. Nothing goes through the process
// environment.
type memoryKeys struct {
	ids      age.ParsedIdentities
	fallback keyservice.Server
}

func (m memoryKeys) Decrypt(ctx context.Context, req *keyservice.DecryptRequest) (*keyservice.DecryptResponse, error) {
	ak, ok := req.Key.GetKeyType().(*keyservice.Key_AgeKey)
	if !ok {
		return m.fallback.Decrypt(ctx, req)
	}
	mk := &age.MasterKey{Recipient: ak.AgeKey.GetRecipient(), EncryptedKey: string(req.GetCiphertext())}
	m.ids.ApplyToMasterKey(mk)
	plain, err := mk.Decrypt()
	if err != nil {
		return nil, fmt.Errorf("age recipient %s: %w", mk.Recipient, err)
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

func (m memoryKeys) Encrypt(context.Context, *keyservice.EncryptRequest) (*keyservice.EncryptResponse, error) {
	return nil, fmt.Errorf("opm only decrypts")
}
