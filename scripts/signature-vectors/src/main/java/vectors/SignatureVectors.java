package vectors;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.MapperFeature;
import tools.jackson.databind.ObjectMapper;
import tools.jackson.databind.SerializationFeature;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ObjectNode;

/**
 * Reference vectors for the workbench's experiment input signature (docs/contract.md, "Input
 * signature"). Each case names stored documents (a query set, judgments, search configurations, as
 * their _source), read the way the cluster hands a _source to a plugin (numbers as Integer, Long,
 * BigInteger or Double; objects as maps); the three payloads the OpenSearch search-relevance
 * plugin hashes are built from them and written with Jackson 3 in its canonical form (map entries
 * and properties sorted by key), and their SHA-256 printed beside them.
 *
 * <p>Usage: {@code SignatureVectors <cases.json> <out.json>}. The output holds every case with its
 * inputs, the three canonical strings and their hashes.
 */
public final class SignatureVectors {

    private static final ObjectMapper CANONICAL = JsonMapper.builder()
        .configure(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS, true)
        .configure(MapperFeature.SORT_PROPERTIES_ALPHABETICALLY, true)
        .build();
    private static final ObjectMapper PLAIN = JsonMapper.builder()
        .configure(SerializationFeature.INDENT_OUTPUT, true)
        .build();

    private SignatureVectors() {}

    public static void main(String[] args) throws Exception {
        @SuppressWarnings("unchecked")
        Map<String, Object> input = PLAIN.readValue(new File(args[0]), Map.class);
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> cases = (List<Map<String, Object>>) input.get("cases");
        List<Map<String, Object>> out = new ArrayList<>();
        for (Map<String, Object> c : cases) {
            Map<String, Object> canonical = new LinkedHashMap<>();
            canonical.put("query_set", CANONICAL.writeValueAsString(querySetPayload(map(c.get("querySet")))));
            canonical.put("judgment_list", CANONICAL.writeValueAsString(judgmentsPayload(listOfMaps(c.get("judgments")))));
            canonical.put("search_configurations",
                CANONICAL.writeValueAsString(configurationsPayload(listOfMaps(c.get("searchConfigurations")))));
            Map<String, Object> hashes = new LinkedHashMap<>();
            for (Map.Entry<String, Object> e : canonical.entrySet()) {
                hashes.put(e.getKey(), sha256((String) e.getValue()));
            }
            Map<String, Object> vector = new LinkedHashMap<>(c);
            vector.put("canonical", canonical);
            vector.put("inputSignature", hashes);
            out.add(vector);
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("generator", "scripts/signature_vectors.sh (Jackson " + JsonMapper.class.getPackage().getImplementationVersion()
            + ", Java " + System.getProperty("java.version") + ")");
        result.put("cases", out);
        PLAIN.writeValue(new File(args[1]), result);
    }

    /** {"queries": [the entries' queryText strings, sorted]}. */
    private static Map<String, Object> querySetPayload(Map<String, Object> querySet) {
        List<String> texts = new ArrayList<>();
        for (Map<String, Object> entry : listOfMaps(querySet.get("querySetQueries"))) {
            String text = (String) entry.get("queryText");
            if (text != null) {
                texts.add(text);
            }
        }
        texts.sort(null);
        Map<String, Object> payload = new TreeMap<>();
        payload.put("queries", texts);
        return payload;
    }

    /** One {"rows": [...]} per judgment, in the experiment's order. */
    private static List<Object> judgmentsPayload(List<Map<String, Object>> judgments) {
        List<Object> payload = new ArrayList<>();
        for (Map<String, Object> judgment : judgments) {
            Map<String, Object> one = new TreeMap<>();
            one.put("rows", rows(judgment.get("judgmentRatings")));
            payload.add(one);
        }
        return payload;
    }

    /**
     * Rows {"query", "ratings"} sorted by query (a stable sort); each rating map's keys sorted and
     * the ratings ordered by their canonical JSON.
     */
    private static List<Object> rows(Object judgmentRatings) {
        List<Map<String, Object>> rows = new ArrayList<>();
        if (!(judgmentRatings instanceof List<?> blocks)) {
            return new ArrayList<>();
        }
        for (Object blockObject : blocks) {
            if (!(blockObject instanceof Map<?, ?> block)) {
                continue;
            }
            Object query = block.get("query");
            List<String[]> keyed = new ArrayList<>();
            List<Map<String, Object>> byKey = new ArrayList<>();
            if (block.get("ratings") instanceof List<?> ratings) {
                for (Object rating : ratings) {
                    if (rating instanceof Map<?, ?> r) {
                        Map<String, Object> sorted = new TreeMap<>();
                        for (Map.Entry<?, ?> e : r.entrySet()) {
                            sorted.put((String) e.getKey(), e.getValue());
                        }
                        keyed.add(new String[] {CANONICAL.writeValueAsString(sorted), String.valueOf(byKey.size())});
                        byKey.add(sorted);
                    }
                }
            }
            keyed.sort((a, b) -> a[0].compareTo(b[0]));
            List<Object> ordered = new ArrayList<>();
            for (String[] k : keyed) {
                ordered.add(byKey.get(Integer.parseInt(k[1])));
            }
            Map<String, Object> row = new TreeMap<>();
            row.put("query", query == null ? "" : String.valueOf(query));
            row.put("ratings", ordered);
            rows.add(row);
        }
        rows.sort((a, b) -> ((String) a.get("query")).compareTo((String) b.get("query")));
        return new ArrayList<>(rows);
    }

    /** One {"index", "pipeline", "query"} per configuration, in the experiment's order. */
    private static List<Object> configurationsPayload(List<Map<String, Object>> configurations) {
        List<Object> payload = new ArrayList<>();
        for (Map<String, Object> configuration : configurations) {
            Map<String, Object> one = new TreeMap<>();
            one.put("index", configuration.get("index"));
            Object pipeline = configuration.get("searchPipeline");
            one.put("pipeline", pipeline == null ? "" : pipeline);
            one.put("query", searchBody((String) configuration.get("query")));
            payload.add(one);
        }
        return payload;
    }

    /**
     * The query as a string: a JSON object re-written by Jackson without from, size and profile;
     * anything else (a Mustache template that is not JSON) as its trimmed text.
     */
    private static String searchBody(String query) {
        if (query == null) {
            return "";
        }
        String trimmed = query.trim();
        if (trimmed.isEmpty()) {
            return "";
        }
        try {
            JsonNode node = CANONICAL.readTree(trimmed);
            if (node != null && node.isObject()) {
                ObjectNode body = (ObjectNode) node;
                body.remove("from");
                body.remove("size");
                body.remove("profile");
                return CANONICAL.writeValueAsString(body);
            }
        } catch (JacksonException notJson) {
            // the text itself
        }
        return trimmed;
    }

    private static String sha256(String text) throws Exception {
        byte[] digest = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
        StringBuilder hex = new StringBuilder();
        for (byte b : digest) {
            hex.append(String.format("%02x", b & 0xff));
        }
        return hex.toString();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object value) {
        return value instanceof Map<?, ?> m ? (Map<String, Object>) m : Map.of();
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> listOfMaps(Object value) {
        List<Map<String, Object>> out = new ArrayList<>();
        if (value instanceof List<?> list) {
            for (Object o : list) {
                if (o instanceof Map<?, ?> m) {
                    out.add((Map<String, Object>) m);
                }
            }
        }
        return out;
    }
}
