// A publisher on RabbitMQ's Java client (Debian's librabbitmq-client-java)
// given every node of a Warren cluster as its address list: it publishes
// persistent messages with confirms into a durable queue for a while and,
// whenever its connection dies, connects again through the same list (the
// client tries each address in turn; only the leader accepts). It prints
// one line per confirmed message ("confirmed N") and per reconnection.
//
// Usage: java FailoverPublisher QUEUE SECONDS host:port [host:port...]
import com.rabbitmq.client.Address;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.MessageProperties;
import java.nio.charset.StandardCharsets;

public class FailoverPublisher {
    public static void main(String[] args) throws Exception {
        String queue = args[0];
        long end = System.currentTimeMillis() + Long.parseLong(args[1]) * 1000;
        Address[] addresses = new Address[args.length - 2];
        for (int i = 2; i < args.length; i++)
            addresses[i - 2] = Address.parseAddress(args[i]);
        ConnectionFactory factory = new ConnectionFactory();
        factory.setAutomaticRecoveryEnabled(false); // reconnect below, on the list
        factory.setRequestedHeartbeat(2);
        factory.setConnectionTimeout(2000);
        long n = 0;
        while (System.currentTimeMillis() < end) {
            try (Connection conn = factory.newConnection(addresses)) {
                System.out.println("connected " + conn.getAddress().getHostAddress());
                Channel ch = conn.createChannel();
                ch.queueDeclare(queue, true, false, false, null);
                ch.confirmSelect();
                while (System.currentTimeMillis() < end) {
                    long id = n++;
                    ch.basicPublish("", queue, MessageProperties.PERSISTENT_BASIC,
                                    Long.toString(id).getBytes(StandardCharsets.UTF_8));
                    ch.waitForConfirmsOrDie(10000);
                    System.out.println("confirmed " + id);
                }
            } catch (Exception e) {
                System.out.println("lost " + e.getClass().getSimpleName());
                Thread.sleep(100);
            }
        }
        System.out.flush();
    }
}
