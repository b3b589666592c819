import org.apache.solr.embedded.JettyConfig;
import org.apache.solr.embedded.JettySolrRunner;

/**
 * Runs Solr in Jetty on loopback for scripts/solr.sh: WorkbenchSolr SOLR_HOME PORT.
 *
 * <p>The Solr server distribution is not on Maven Central; solr-core plus the test framework's
 * JettySolrRunner are, and serve the same HTTP API under /solr. Stops on SIGTERM.
 */
public final class WorkbenchSolr {
  private WorkbenchSolr() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: WorkbenchSolr SOLR_HOME PORT");
      System.exit(2);
    }
    JettyConfig config =
        JettyConfig.builder()
            .setPort(Integer.parseInt(args[1]))
            .setContext("/solr")
            .useOnlyHttp1(true)
            .stopAtShutdown(true)
            .build();
    JettySolrRunner solr = new JettySolrRunner(args[0], config);
    solr.start();
    System.out.println("Solr is listening at " + solr.getBaseUrl());
    Thread.currentThread().join();
  }
}
