// MirrorWatch is a Java program that reloads a PKCS#12 keystore and truststore
// the way JVM frameworks do: a java.nio WatchService on their directory, acting
// on the events that name the files. It loads each file with the JDK's own
// KeyStore, KeyManagerFactory and TrustManagerFactory on every event and prints
// what it holds when that changes:
//
//	KEYSTORE <sha256 of the leaf> <key algorithm> <chain length>
//	TRUSTSTORE <sha256 of each trust anchor, comma-separated>
//	ERROR <file> <message>      a file that did not load
//	READY                       the watch is registered
//
// Usage: java MirrorWatch DIR PASSWORD_FILE [KEYSTORE_NAME TRUSTSTORE_NAME]
import java.nio.file.*;
import java.security.*;
import java.security.cert.*;
import java.util.*;
import javax.net.ssl.*;

public class MirrorWatch {
    static String lastKey = "", lastTrust = "";

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        String pwText = new String(Files.readAllBytes(Paths.get(args[1])), "UTF-8");
        char[] pw = pwText.replaceFirst("\r?\n$", "").toCharArray();
        String ksName = args.length > 2 ? args[2] : "keystore.p12";
        String tsName = args.length > 3 ? args[3] : "truststore.p12";
        WatchService ws = FileSystems.getDefault().newWatchService();
        dir.register(ws, StandardWatchEventKinds.ENTRY_CREATE, StandardWatchEventKinds.ENTRY_MODIFY);
        load(dir.resolve(ksName), pw, true);
        load(dir.resolve(tsName), pw, false);
        System.out.println("READY");
        System.out.flush();
        while (true) {
            WatchKey key = ws.take();
            for (WatchEvent<?> ev : key.pollEvents()) {
                if (ev.kind() == StandardWatchEventKinds.OVERFLOW) {
                    System.out.println("ERROR - watch overflow");
                    continue;
                }
                String name = ev.context().toString();
                if (name.equals(ksName)) load(dir.resolve(name), pw, true);
                if (name.equals(tsName)) load(dir.resolve(name), pw, false);
            }
            System.out.flush();
            key.reset();
        }
    }

    static void load(Path p, char[] pw, boolean keystore) {
        try {
            KeyStore ks = KeyStore.getInstance("PKCS12");
            try (var in = Files.newInputStream(p)) {
                ks.load(in, pw);
            }
            if (keystore) {
                KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
                kmf.init(ks, pw);
                String alias = null;
                for (String a : Collections.list(ks.aliases())) if (ks.isKeyEntry(a)) alias = a;
                if (alias == null) throw new Exception("no key entry");
                Key k = ks.getKey(alias, pw);
                java.security.cert.Certificate[] chain = ks.getCertificateChain(alias);
                String line = "KEYSTORE " + sha256(chain[0]) + " " + k.getAlgorithm() + " " + chain.length;
                if (!line.equals(lastKey)) { System.out.println(line); lastKey = line; }
            } else {
                TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
                tmf.init(ks);
                X509TrustManager tm = (X509TrustManager) tmf.getTrustManagers()[0];
                List<String> fps = new ArrayList<>();
                for (X509Certificate c : tm.getAcceptedIssuers()) fps.add(sha256(c));
                Collections.sort(fps);
                String line = "TRUSTSTORE " + String.join(",", fps);
                if (!line.equals(lastTrust)) { System.out.println(line); lastTrust = line; }
            }
        } catch (Exception e) {
            System.out.println("ERROR " + p.getFileName() + " " + e);
        }
    }

    static String sha256(java.security.cert.Certificate c) throws Exception {
        byte[] d = MessageDigest.getInstance("SHA-256").digest(c.getEncoded());
        StringBuilder b = new StringBuilder();
        for (byte x : d) b.append(String.format("%02x", x));
        return b.toString();
    }
}
