package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
)

// certValidity is how long generated certificates are valid. A control
// plane lives for one test binary run, so a week is plenty.
const certValidity = 7 * 24 * time.Hour

// keyPair is a PEM-encoded certificate and private key.
type keyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// authority is a throw-away certificate authority that signs the serving
// certificates and the client certificates of one control plane.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "handoff-controlplane-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &authority{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// servingPair issues a TLS server certificate valid for 127.0.0.1 and
// localhost.
func (a *authority) servingPair(commonName string) (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
}

// clientPair issues a TLS client certificate. The API server maps the
// common name to the user name and each organization to a group.
func (a *authority) clientPair(user string, groups []string) (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (a *authority) issue(tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("encoding key: %w", err)
	}
	return keyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// serviceAccountKeys returns a PEM-encoded RSA private key and its public
// key, used by the API server to sign and verify service-account tokens.
func serviceAccountKeys() (privPEM, pubPEM []byte, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("generating service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding service-account public key: %w", err)
	}
	privPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return privPEM, pubPEM, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial, nil
}

// writeFiles writes each name => content pair into dir with mode 0600.
func writeFiles(dir string, files map[string][]byte) error {
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (cp *ControlPlane) configFor(pair keyPair) *rest.Config {
	return &rest.Config{
		Host: cp.apiURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.ca.certPEM,
			CertData: pair.CertPEM,
			KeyData:  pair.KeyPEM,
		},
		QPS:   clientQPS,
		Burst: clientBurst,
	}
}

func (cp *ControlPlane) writePKI() error {
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	cp.ca = ca
	serving, err := ca.servingPair("kube-apiserver")
	if err != nil {
		return err
	}
	kcmServing, err := ca.servingPair("kube-controller-manager")
	if err != nil {
		return err
	}
	cp.admin, err = ca.clientPair("handoff-admin", []string{"system:masters"})
	if err != nil {
		return err
	}
	saKey, saPub, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	return writeFiles(cp.workDir, map[string][]byte{
		"ca.crt":        ca.certPEM,
		"apiserver.crt": serving.CertPEM,
		"apiserver.key": serving.KeyPEM,
		"kcm.crt":       kcmServing.CertPEM,
		"kcm.key":       kcmServing.KeyPEM,
		"sa.key":        saKey,
		"sa.pub":        saPub,
	})
}

// writeKubeconfig writes an admin kubeconfig with embedded credentials.
func (cp *ControlPlane) writeKubeconfig() error {
	b64 := base64.StdEncoding.EncodeToString
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: handoff
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: handoff-admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: handoff
  context:
    cluster: handoff
    user: handoff-admin
current-context: handoff
`, cp.apiURL, b64(cp.ca.certPEM), b64(cp.admin.CertPEM), b64(cp.admin.KeyPEM))
	cp.kubeconfig = filepath.Join(cp.workDir, "admin.kubeconfig")
	return os.WriteFile(cp.kubeconfig, []byte(content), 0o600)
}

// tlsClient is an HTTP client that trusts the control plane's CA.
func (cp *ControlPlane) tlsClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.ca.certPEM) {
		return nil, errors.New("cannot parse CA certificate")
	}
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			Proxy:           nil,
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		},
	}, nil
}
